"""N queens by backtracking over rows, counting solutions: 92 for 8 queens.
placed holds the columns of the rows above, nearest first (a linked list of pairs, like the ML
list). Same algorithm: nqueens8.sml."""


def safe(col, dist, placed):
    if placed is None:
        return True
    c, cs = placed
    return col != c and col != c + dist and col != c - dist and safe(col, dist + 1, cs)


def queens(n, row, placed):
    if row == n:
        return 1

    def try_(col):
        if col > n:
            return 0
        here = queens(n, row + 1, (col, placed)) if safe(col, 1, placed) else 0
        return here + try_(col + 1)

    return try_(1)


print(queens(8, 0, None))
