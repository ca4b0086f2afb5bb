//! Seeking and pausing a group on PostgreSQL: each one transaction on the group's row,
//! planned and applied by `mailroom::group` like every other call
//! (`docs/scale-out.md`), so the rules are the embedded store's.

use mailroom::group::{ArgumentError, Pause};
use mailroom::topic::{StartPosition, TopicError};
use mailroom_store::StoreError;

use super::group::{apply_planned, Planned};
use super::Postgres;
use crate::backend::BackendError;

fn invalid(error: ArgumentError) -> BackendError {
    BackendError::Store(StoreError::Topic(TopicError::InvalidArgument(error)))
}

impl Postgres {
    /// Moves `group` to `to` and answers its new position, checked against the log's
    /// start and end as read under the group's lock.
    pub(super) async fn seek_group(
        &self,
        topic: &str,
        group: &str,
        to: StartPosition,
    ) -> Result<u64, BackendError> {
        let (position, _) = self
            .group_call(topic, group, None, |planning| {
                let (start, end) = (planning.log_start, planning.log_end);
                let position = match to {
                    StartPosition::Earliest => start,
                    StartPosition::Latest => end,
                    StartPosition::Offset(offset) if (start..=end).contains(&offset) => offset,
                    StartPosition::Offset(offset) => {
                        return Err(invalid(ArgumentError::OutOfRange {
                            field: "offset",
                            min: start,
                            max: end,
                            got: offset,
                        }))
                    }
                };
                let change = planning.state.plan_seek(position);
                apply_planned(&mut planning.state, &change)?;
                Ok(Planned::answer(position))
            })
            .await?;
        Ok(position)
    }

    /// Pauses `group` until `until_ms` (`None`: until a resume).
    pub(super) async fn pause_group(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<(), BackendError> {
        self.group_call(topic, group, None, |planning| {
            if let Some(until_ms) = until_ms {
                Pause::check_until(until_ms, planning.now_ms).map_err(invalid)?;
            }
            let change = planning.state.plan_pause(until_ms);
            apply_planned(&mut planning.state, &change)?;
            Ok(Planned::answer(()))
        })
        .await?;
        Ok(())
    }

    /// Ends `group`'s pause; answers whether one was recorded.
    pub(super) async fn resume_group(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<bool, BackendError> {
        let (resumed, _) = self
            .group_call(topic, group, None, |planning| {
                let Some(change) = planning.state.plan_resume() else {
                    return Ok(Planned::answer(false));
                };
                apply_planned(&mut planning.state, &change)?;
                Ok(Planned::answer(true))
            })
            .await?;
        Ok(resumed)
    }
}
