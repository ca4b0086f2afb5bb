//! The schema, as numbered migrations, and bringing a database up to date on start
//! (`docs/scale-out.md` describes each table).
//!
//! `mailroom_schema.version` says how many migrations have run. A broker migrates under a
//! transaction-scoped advisory lock, so brokers starting together migrate once, and
//! refuses a database whose version is newer than the migrations it knows.

use tokio_postgres::Client;

use super::PgError;

/// The advisory lock key brokers migrate under ("mailroom" in ASCII, as a number).
const MIGRATION_LOCK: i64 = 0x6d61_696c_726f_6f6d;

/// Offsets per log segment: each topic's messages are partitioned into ranges of this
/// many offsets, so retention can drop whole segments.
pub const SEGMENT_OFFSETS: u64 = 1 << 20;

/// The migrations, in order: migration `n` (from 1) brings version `n - 1` to `n`.
pub const MIGRATIONS: &[&str] = &[
    // 1: topics, the partitioned log with room for message metadata, groups and their
    // dead letters.
    r#"
    CREATE TABLE mailroom_topics (
        id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name          text   NOT NULL UNIQUE,
        next_offset   bigint NOT NULL DEFAULT 0,
        start_offset  bigint NOT NULL DEFAULT 0,
        segments_end  bigint NOT NULL DEFAULT 0,
        created_at_ms bigint NOT NULL
    ) WITH (fillfactor = 50);
    CREATE TABLE mailroom_messages (
        topic_id        bigint NOT NULL,
        "offset"        bigint NOT NULL,
        published_at_ms bigint NOT NULL,
        key             bytea,
        headers         jsonb,
        idempotency_key text,
        payload         bytea  NOT NULL,
        PRIMARY KEY (topic_id, "offset")
    ) PARTITION BY LIST (topic_id);
    CREATE TABLE mailroom_groups (
        id              bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        topic_id        bigint NOT NULL REFERENCES mailroom_topics (id) ON DELETE CASCADE,
        name            text   NOT NULL,
        version         bigint NOT NULL,
        state           bytea  NOT NULL,
        dead_letter_seq bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (topic_id, name)
    ) WITH (fillfactor = 50);
    CREATE TABLE mailroom_dead_letters (
        topic_id        bigint  NOT NULL,
        group_name      text    NOT NULL,
        "offset"        bigint  NOT NULL,
        seq             bigint  NOT NULL,
        attempts        integer NOT NULL,
        reason          text,
        at_ms           bigint  NOT NULL,
        published_at_ms bigint  NOT NULL,
        key             bytea,
        headers         jsonb,
        idempotency_key text,
        payload         bytea   NOT NULL,
        PRIMARY KEY (topic_id, group_name, "offset"),
        FOREIGN KEY (topic_id, group_name) REFERENCES mailroom_groups (topic_id, name)
            ON DELETE CASCADE
    );
    "#,
    // 2: idempotency keys, per-topic retention settings, the log's byte count, and what
    // retention removed (`docs/scale-out.md`, "Idempotent publish" and "Retention").
    r#"
    CREATE TABLE mailroom_idempotency_keys (
        topic_id bigint NOT NULL REFERENCES mailroom_topics (id) ON DELETE CASCADE,
        key      text   NOT NULL,
        "offset" bigint NOT NULL,
        at_ms    bigint NOT NULL,
        PRIMARY KEY (topic_id, key)
    );
    ALTER TABLE mailroom_topics
        ADD COLUMN bytes              bigint NOT NULL DEFAULT 0,
        ADD COLUMN retention_age_ms   bigint,
        ADD COLUMN retention_bytes    bigint,
        ADD COLUMN retention_messages bigint,
        ADD COLUMN keep_unconsumed    boolean,
        ADD COLUMN removed_segments   bigint NOT NULL DEFAULT 0,
        ADD COLUMN removed_bytes      bigint NOT NULL DEFAULT 0,
        ADD COLUMN removed_messages   bigint NOT NULL DEFAULT 0;
    UPDATE mailroom_topics t SET bytes = coalesce((SELECT sum(octet_length(m.payload))
        FROM mailroom_messages m WHERE m.topic_id = t.id AND m."offset" >= t.start_offset), 0);
    "#,
    // 3: each topic's own idempotency window (`docs/scale-out.md`, "Idempotent publish"):
    // NULL follows the brokers' `--idempotency-window-*` default.
    r#"
    ALTER TABLE mailroom_topics
        ADD COLUMN idempotency_messages bigint,
        ADD COLUMN idempotency_age_ms   bigint;
    "#,
    // 4: the keyed messages by offset, so a poll reads past its first W fresh messages
    // only the keyed ones, which alone may go out there (`group_window.rs`).
    r#"
    CREATE INDEX mailroom_messages_keyed ON mailroom_messages (topic_id, "offset")
        WHERE key IS NOT NULL;
    "#,
    // 5: the waiting mark: until when, and which broker (-1: more than one), a broker may
    // have a long poll waiting on the topic, so that writes notify the other brokers only
    // then (`waiting.rs`; `docs/scale-out.md`, "Long polls across brokers").
    r#"
    ALTER TABLE mailroom_topics
        ADD COLUMN waiting_until_ms bigint NOT NULL DEFAULT 0,
        ADD COLUMN waiting_broker   bigint NOT NULL DEFAULT 0;
    "#,
];

/// The version this binary brings a database to.
pub fn version_known() -> i32 {
    MIGRATIONS.len() as i32
}

/// Creates or migrates the schema; answers the version the database now holds.
///
/// # Errors
/// [`PgError::NewerSchema`] for a database migrated by a newer binary; the database's
/// errors otherwise.
pub async fn migrate(client: &mut Client) -> Result<i32, PgError> {
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    transaction
        .batch_execute("CREATE TABLE IF NOT EXISTS mailroom_schema (version integer NOT NULL)")
        .await?;
    let found: Option<i32> = transaction
        .query_opt("SELECT version FROM mailroom_schema", &[])
        .await?
        .map(|row| row.get(0));
    let found = match found {
        Some(version) => version,
        None => {
            transaction
                .execute("INSERT INTO mailroom_schema (version) VALUES (0)", &[])
                .await?;
            0
        }
    };
    if found > version_known() {
        return Err(PgError::NewerSchema {
            found,
            known: version_known(),
        });
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        transaction.batch_execute(migration).await?;
        let version = index as i32 + 1;
        transaction
            .execute("UPDATE mailroom_schema SET version = $1", &[&version])
            .await?;
    }
    transaction.commit().await?;
    Ok(version_known())
}

/// The statements that create the segments of `topic_id`'s log from `segments_end` up to
/// one holding offset `end - 1`, and raise the topic's `segments_end` to match; empty if
/// the segments reach `end` already. Run under the topic row's lock, so two brokers never
/// both create a segment.
pub fn extend_segments(topic_id: i64, segments_end: u64, end: u64) -> String {
    let mut statements = String::new();
    if end <= segments_end {
        return statements;
    }
    let mut segment = segments_end / SEGMENT_OFFSETS;
    while segment * SEGMENT_OFFSETS < end {
        statements.push_str(&create_segment(topic_id, segment));
        statements.push_str(";\n");
        segment += 1;
    }
    statements.push_str(&format!(
        "UPDATE mailroom_topics SET segments_end = {} WHERE id = {topic_id}",
        segment * SEGMENT_OFFSETS
    ));
    statements
}

/// The name of `topic_id`'s partition of the log.
pub fn topic_partition(topic_id: i64) -> String {
    format!("mailroom_messages_{topic_id}")
}

/// The statement that creates `topic_id`'s partition of the log (itself partitioned by
/// offset).
pub fn create_topic_partition(topic_id: i64) -> String {
    format!(
        "CREATE TABLE {} PARTITION OF mailroom_messages FOR VALUES IN ({topic_id}) \
         PARTITION BY RANGE (\"offset\")",
        topic_partition(topic_id)
    )
}

/// The statement that creates segment `segment` of `topic_id`'s log.
pub fn create_segment(topic_id: i64, segment: u64) -> String {
    let from = segment * SEGMENT_OFFSETS;
    let to = from + SEGMENT_OFFSETS;
    format!(
        "CREATE TABLE {parent}_{segment} PARTITION OF {parent} FOR VALUES FROM ({from}) TO ({to})",
        parent = topic_partition(topic_id)
    )
}
