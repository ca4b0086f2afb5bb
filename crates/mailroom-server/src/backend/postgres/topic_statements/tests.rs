//! Statements of a topic whose generic plan was made while the topic's segment was small
//! and had no statistics: grown to 20,064 rows of 1 KiB (about 2,900 pages), each must
//! still read about its own range, not the segment ("Plans made on small segments").
//!
//! Each test makes the plan as a broker's connection does (a generic plan, on first
//! use, over a segment of 64 rows that autovacuum may not analyze), grows the segment,
//! and counts the buffers one more run touches under `EXPLAIN (ANALYZE, BUFFERS)`.

use serde_json::Value;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use super::super::group::payload_rows;
use super::super::group_window::window_rows;
use super::super::group_write::add_dead_letters;
use super::super::schema::{create_segment, create_topic_partition, migrate};
use super::offset_bounds;

/// The rows the segment holds when the plan is made, and after it has grown.
const SMALL: i64 = 64;
const GROWN: i64 = 20_064;
/// The most buffers a run over the grown segment may touch: a few index pages and the
/// heap pages of the rows it reads (under 20 for these tests), where a scan of the
/// segment touches about 3,000.
const BUFFERS_MAX: u64 = 100;

/// A session on a new database with the schema, topic `t` (with group `g`) and its
/// first segment holding offsets `[0, SMALL)`, every seventh keyed; autovacuum is off on
/// the segment, so that no analyze makes the plan again behind the test's back. `None`
/// where `MAILROOM_TEST_POSTGRES` is not set and the tests may be skipped.
async fn small_segment(name: &str) -> Option<(Client, i64)> {
    let cluster = match std::env::var("MAILROOM_TEST_POSTGRES") {
        Ok(url) => url,
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("MAILROOM_TEST_POSTGRES is not set under CI=true")
        }
        Err(_) => {
            eprintln!("not run: MAILROOM_TEST_POSTGRES is not set (scripts/postgres.sh start)");
            return None;
        }
    };
    let admin = connect(&cluster).await;
    let database = format!("mailroom_plans_{name}_{}", std::process::id());
    for statement in ["DROP DATABASE IF EXISTS", "CREATE DATABASE"] {
        admin
            .batch_execute(&format!("{statement} {database}"))
            .await
            .expect("make a new test database");
    }
    let mut config: tokio_postgres::Config = cluster.parse().expect("a cluster URL");
    let mut client = connect_with(config.dbname(&database)).await;
    migrate(&mut client).await.expect("migrate");
    let topic: i64 = client
        .query_one(
            "INSERT INTO mailroom_topics (name, created_at_ms) VALUES ('t', 0) RETURNING id",
            &[],
        )
        .await
        .expect("add the topic")
        .get(0);
    let segment = format!("{}_0", super::super::schema::topic_partition(topic));
    client
        .batch_execute(&format!(
            "{}; {}; ALTER TABLE {segment} SET (autovacuum_enabled = false); \
             INSERT INTO mailroom_groups (topic_id, name, version, state) \
             VALUES ({topic}, 'g', 0, '')",
            create_topic_partition(topic),
            create_segment(topic, 0),
        ))
        .await
        .expect("make the topic's partition, segment and group");
    append(&client, topic, 0, SMALL).await;
    Some((client, topic))
}

async fn connect(url: &str) -> Client {
    connect_with(&url.parse().expect("a cluster URL")).await
}

async fn connect_with(config: &tokio_postgres::Config) -> Client {
    let (client, connection) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

/// Appends offsets `[from, to)` of 1 KiB each to `topic`, every seventh keyed.
async fn append(client: &Client, topic: i64, from: i64, to: i64) {
    client
        .execute(
            "INSERT INTO mailroom_messages (topic_id, \"offset\", published_at_ms, key, payload) \
             SELECT $1, o, 0, CASE WHEN o % 7 = 0 THEN '\\x01'::bytea END, \
             convert_to(repeat('x', 1024), 'UTF8') FROM generate_series($2::bigint, $3::bigint - 1) o",
            &[&topic, &from, &to],
        )
        .await
        .expect("append");
}

/// Prepares `text` as `s`, runs it once with `small` (its generic plan made on the small
/// segment), grows the segment to [`GROWN`] rows and runs it with `grown`: answers the
/// buffers and the rows that last run touched and answered.
async fn after_growth(
    client: &Client,
    topic: i64,
    text: &str,
    small: &str,
    grown: &str,
) -> (u64, u64) {
    client
        .batch_execute(&format!(
            "SET plan_cache_mode = force_generic_plan; PREPARE s AS {text}; \
             EXECUTE s({small})"
        ))
        .await
        .expect("run the statement on the small segment");
    append(client, topic, SMALL, GROWN).await;
    let answer = client
        .simple_query(&format!(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE s({grown})"
        ))
        .await
        .expect("run the statement on the grown segment");
    let explained: Value = answer
        .iter()
        .find_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0),
            _ => None,
        })
        .and_then(|text| serde_json::from_str(text).ok())
        .expect("a plan in JSON");
    let plan = &explained[0]["Plan"];
    let count = |field: &str| {
        plan[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} in {plan}"))
    };
    (
        count("Shared Hit Blocks") + count("Shared Read Blocks"),
        count("Actual Rows"),
    )
}

/// `{a,b,...}`, a bigint array literal.
fn array(offsets: &[i64]) -> String {
    let items: Vec<String> = offsets.iter().map(i64::to_string).collect();
    format!("'{{{}}}'", items.join(","))
}

// A poll's window: two redriven slots far below, the plain window and the keyed span.
#[tokio::test]
async fn a_window_read_planned_on_a_small_segment_reads_its_ranges_only() {
    let Some((client, topic)) = small_segment("window").await else {
        return;
    };
    let fresh = GROWN - 64;
    let redriven = [5, 6];
    let (low, high) = offset_bounds(&redriven);
    // $1 topic, $2 redriven, $3 fresh, $4 plain end, $5 keyed end, $6 ready, $7 taken
    // end, $8 byte cap, $9 slots from, $10/$11 the redriven's bounds.
    let small = format!("{topic}, '{{}}', 0, 16, 64, '{{}}', 16, 16000, 0, 0, 0");
    let grown = format!(
        "{topic}, {}, {fresh}, {GROWN}, {GROWN}, '{{}}', {GROWN}, 16000, {fresh}, {low}, {high}",
        array(&redriven)
    );
    let (buffers, rows) = after_growth(&client, topic, &window_rows(topic), &small, &grown).await;
    assert_eq!(rows, 2 + 64, "the redriven slots and the plain window");
    assert!(buffers <= BUFFERS_MAX, "{buffers} buffers for {rows} rows");
}

// The payloads a window missed.
#[tokio::test]
async fn payloads_planned_on_a_small_segment_read_their_range_only() {
    let Some((client, topic)) = small_segment("payloads").await else {
        return;
    };
    let missed = [GROWN - 9, GROWN - 8, GROWN - 2];
    let (low, high) = offset_bounds(&missed);
    let small = format!("{topic}, '{{1,2}}', 1, 3");
    let grown = format!("{topic}, {}, {low}, {high}", array(&missed));
    let (buffers, rows) = after_growth(&client, topic, &payload_rows(topic), &small, &grown).await;
    assert_eq!(rows, 3);
    assert!(buffers <= BUFFERS_MAX, "{buffers} buffers for {rows} rows");
}

// The copies of dead-lettered messages.
#[tokio::test]
async fn dead_letter_copies_planned_on_a_small_segment_read_their_range_only() {
    let Some((client, topic)) = small_segment("dead").await else {
        return;
    };
    let dead = [GROWN - 30, GROWN - 3];
    let (low, high) = offset_bounds(&dead);
    let small = format!("{topic}, 'g', '{{1}}', '{{0}}', '{{1}}', '{{NULL}}', '{{0}}', 1, 2");
    let grown = format!(
        "{topic}, 'g', {}, '{{1,2}}', '{{1,1}}', '{{NULL,NULL}}', '{{0,0}}', {low}, {high}",
        array(&dead)
    );
    let text = add_dead_letters(topic);
    let (buffers, _) = after_growth(&client, topic, &text, &small, &grown).await;
    let copied: i64 = client
        .query_one(
            "SELECT count(*) FROM mailroom_dead_letters WHERE \"offset\" = ANY($1)",
            &[&dead.to_vec()],
        )
        .await
        .expect("count the copies")
        .get(0);
    assert_eq!(copied, 2);
    assert!(buffers <= BUFFERS_MAX, "{buffers} buffers");
}

#[test]
fn offset_bounds_run_from_the_lowest_to_past_the_highest() {
    assert_eq!(offset_bounds(&[7, 3, 5]), (3, 8));
    assert_eq!(offset_bounds(&[4]), (4, 5));
    assert_eq!(offset_bounds(&[]), (0, 0));
}
