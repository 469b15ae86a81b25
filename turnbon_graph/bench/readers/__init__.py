"""Run folders written by other tools, read as this harness's episodes: Harbor's job
folders (`harbor_jobs`) and Inspect AI's log folders (`inspect_logs`)."""
