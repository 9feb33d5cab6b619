"""Reports: the summary card, the guidance, and the HTML and Markdown a profile is read in. This layer reads
records and result files only, never the engine."""
