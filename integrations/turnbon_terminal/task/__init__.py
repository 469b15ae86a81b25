"""Reading a task: its folder in the Terminal-Bench 2 layout (`folders`, `tb2`), what it
may use (`budget`, `limits`), what of that this machine enforces (`enforcement`), and how
its commands are set up (`settings`, `envvars`)."""
