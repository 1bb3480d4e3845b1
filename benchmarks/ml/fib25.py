"""Naive doubly recursive Fibonacci: fib 25 = 75025 (242785 calls). Same algorithm: fib25.sml."""


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


print(fib(25))
