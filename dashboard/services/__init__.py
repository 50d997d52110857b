"""What the JSON API and the HTML pages both show, built from the store's queries
(runner.store.queries) and the runner's reports; no routes here."""
