"""Checkout prices for a small shop."""
