"""Kestrel inside editors: an agent over the Agent Client Protocol (ACP) on stdio."""
