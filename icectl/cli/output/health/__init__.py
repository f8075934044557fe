"""icectl health's drawings: the terminal report, the HTML page, its SVG charts, the Prometheus file."""
