//! Topics: a retained log read by independent consumer groups.
