"""Man pages, shell completions and examples, generated from the app."""
