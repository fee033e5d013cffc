"""Model providers: Anthropic, OpenAI-compatible servers, retries and pricing.

Import the provider you need from its own module (`kestrel.models.anthropic`,
`kestrel.models.openai_compat`), so one SDK is not loaded for the other's sake.
"""
