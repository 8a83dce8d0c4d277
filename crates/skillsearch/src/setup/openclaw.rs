//! OpenClaw: installs the skillsearch plugin (context engine, `before_prompt_build` hook, tools)
//! and checks every gate that makes it silently inert.

use super::{Check, SetupPlan, SetupRequest};
use anyhow::{Result, bail};
use std::path::Path;

pub fn setup(_req: &SetupRequest) -> Result<SetupPlan> {
    bail!("setup openclaw is being built in this session")
}

pub fn doctor(_home: &Path) -> Result<Vec<Check>> {
    bail!("doctor openclaw is being built in this session")
}
