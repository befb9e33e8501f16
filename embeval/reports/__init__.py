"""Reading results files: tables (terminal, Markdown, LaTeX, CSV), plots and paired comparisons."""
