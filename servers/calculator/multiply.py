def multiply(a: float, b: float) -> float:
    """Multiply two numbers and return the product.

    Example: multiply(6, 7) -> 42
    """
    return a * b
