"""The `agentfs` command line: `agentfs --help` lists the commands and the exit codes."""
