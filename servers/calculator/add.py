def add(a: float, b: float) -> float:
    """Add two numbers and return the sum.

    Example: add(5, 3) -> 8
    """
    return a + b
