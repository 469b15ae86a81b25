"""The statistics every report and analysis reads: the paper's metrics over episodes
(`metrics`), the paired bootstrap over tasks and Holm-Bonferroni (`bootstrap`), and all
pairs of settings at equal budget (`pairs`)."""
