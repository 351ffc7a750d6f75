//! `repo-retriever plugins`: the registered kinds, with a stores file's
//! dynamic plugins.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct PluginsCmd {
    /// Also load the dynamic plugins this stores file lists.
    #[arg(long)]
    pub stores: Option<PathBuf>,
}

/// One line per registered kind.
pub fn run(args: PluginsCmd) -> Result<bool, String> {
    use rr_engine::stores;
    let file = args.stores.as_deref().map(stores::read).transpose().map_err(|e| e.to_string())?;
    let registry = stores::registry(file.as_ref()).map_err(|e| e.to_string())?;
    super::output::stdout(&stores::list(&registry))?;
    Ok(true)
}
