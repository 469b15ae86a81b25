"""The host sandbox: each episode's commands run under bubblewrap (`bwrap`) in a folder of
its own (`sandbox`, `workroot`), as a user of its own (`users`), bounded by a control
group (`cgroups`) and a file system of its own (`disk`); `episode` is an episode there."""
