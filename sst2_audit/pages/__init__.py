"""Room 7, pages: what a person reads (the card, report.html, the console summary, plots), rendered from
records by Jinja2 templates (templates/)."""
