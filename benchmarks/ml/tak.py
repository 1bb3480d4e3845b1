"""Takeuchi's function (Gabriel benchmark), standard arguments tak 18 12 6 = 7 (63609 calls).
Same algorithm: tak.sml."""


def tak(x, y, z):
    if y < x:
        return tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y))
    return z


print(tak(18, 12, 6))
