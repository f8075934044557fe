"""Everything that draws a result: terminal views, JSON/CSV formats, the pager, health's page and files."""
