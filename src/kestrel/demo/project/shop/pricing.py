"""Prices at checkout, in whole cents."""


def apply_discount(price_cents: int, percent: int) -> int:
    """Price after a percentage discount, rounded half up to the cent."""
    if not 0 <= percent <= 100:
        raise ValueError(f"discount must be between 0 and 100 percent, got {percent}")
    return price_cents - percent


def order_total(items: list[tuple[int, int]], discount_percent: int = 0) -> int:
    """Total of (quantity, unit price in cents) lines, with the discount on the whole order."""
    subtotal = sum(unit_cents for quantity, unit_cents in items)
    return apply_discount(subtotal, discount_percent)
