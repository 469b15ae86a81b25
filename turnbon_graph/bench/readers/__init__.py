"""Run folders written by other tools, read as this harness's episodes: Harbor's job
folders (`harbor_jobs`)."""
