"""Running a score: plan, execute, resume and the results files; the configuration; quickstart."""
