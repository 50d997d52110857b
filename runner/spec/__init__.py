"""The campaign spec: validated input (`model.CampaignSpec`, `model.parse_spec`) and its
expansion into cells (`model.expand`). Imports nothing that runs anything (docs/architecture.md)."""
