"""The curated side: memories and their status (`memories`), the review workflow (`review`), structure drafts
(`structure`) and retrieve's Markdown bundle (`retrieval`)."""
