% Peer of benchmarks/parlog/pascal.par for SWI-Prolog: Pascal's triangle to row 400 with the
% same bignums (lists of base-100,000 digits, least significant first, added with a carry;
% not SWI's own big integers), row after row, then the sum of the last row (2^400).
% swipl -q -g main -t halt pascal.pl prints one JSON line: the CPU time of one full run,
% best of 3.

size(400).

rows(K, N, Row, Last) :- K < N, !, next(Row, Row1), K1 is K + 1, rows(K1, N, Row1, Last).
rows(_, _, Row, Row).

next(Row, [[1]|Row1]) :- pairs(Row, Row1).

pairs([X, Y|Xs], [Z|Zs]) :- !, add(X, Y, 0, Z), pairs([Y|Xs], Zs).
pairs([_], [[1]]).

add([X|Xs], [Y|Ys], C, [Z|Zs]) :- S is X + Y + C, S >= 100000, !, Z is S - 100000, add(Xs, Ys, 1, Zs).
add([X|Xs], [Y|Ys], C, [Z|Zs]) :- !, Z is X + Y + C, add(Xs, Ys, 0, Zs).
add([], Ys, C, Zs) :- !, carry(Ys, C, Zs).
add(Xs, [], C, Zs) :- carry(Xs, C, Zs).

carry(Xs, 0, Xs) :- !.
carry([X|Xs], 1, [0|Zs]) :- X =:= 99999, !, carry(Xs, 1, Zs).
carry([X|Xs], 1, [Z|Xs]) :- !, Z is X + 1.
carry([], 1, [1]).

total([X|Xs], A, S) :- add(X, A, 0, A1), total(Xs, A1, S).
total([], S, S).

run(N, Digits) :- rows(0, N, [[1]], Row), total(Row, [0], S), reverse(S, Digits).

% 2^N in base-100,000 digits, most significant first (the answer run/2 must give)
expected(N, Digits) :- X is 2 ^ N, digits(X, [], Digits).
digits(0, Ds, Ds) :- !.
digits(X, Ds0, Ds) :- D is X mod 100000, X1 is X // 100000, digits(X1, [D|Ds0], Ds).

time_once(Seconds) :-
    size(N),
    garbage_collect,
    statistics(cputime, T0),
    run(N, Digits),
    statistics(cputime, T1),
    expected(N, Digits),
    Seconds is T1 - T0.

main :-
    findall(S, (between(1, 3, _), time_once(S)), Times),
    min_list(Times, Best),
    format('{"name": "pascal", "metric": "time", "value": ~6f, "unit": "s"}~n', [Best]).
