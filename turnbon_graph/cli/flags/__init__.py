"""The commands' flags: their values (`values`), the parser (`parser`), the flags several
commands share (`shared`), the search strategies' flags (`strategy`), and run folders'
names and resume commands (`run_folder`). A command's own flags are in its own module."""
