"""The reference agent: a small consumer of the SCORPIOX file protocol (spec reference-agent.md)."""
