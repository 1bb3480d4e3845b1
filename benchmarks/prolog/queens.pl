% Peer of benchmarks/parlog/queens.par for SWI-Prolog: counts all solutions of
% 8 queens with the same search (column by column, counts summed).
% swipl -q -g main -t halt queens.pl prints one JSON line: the CPU time of one
% full run, best of 3.

queens(N, Count) :- place(0, N, [], Count).

place(K, N, _, 1) :- K =:= N, !.
place(K, N, Qs, Count) :- try(1, N, Qs, K, Count).

try(Col, N, _, _, 0) :- Col > N, !.
try(Col, N, Qs, K, Count) :-
    safe(Qs, Col, 1, Ok),
    extend(Ok, Col, N, Qs, K, C1),
    Col1 is Col + 1,
    try(Col1, N, Qs, K, C2),
    Count is C1 + C2.

safe([], _, _, yes) :- !.
safe([Q|Qs], Col, D, Ok) :-
    Q =\= Col, Q - Col =\= D, Col - Q =\= D, !,
    D1 is D + 1, safe(Qs, Col, D1, Ok).
safe(_, _, _, no).

extend(yes, Col, N, Qs, K, Count) :- K1 is K + 1, place(K1, N, [Col|Qs], Count).
extend(no, _, _, _, _, 0).

time_once(Seconds) :-
    garbage_collect,
    statistics(cputime, T0),
    queens(8, Count),
    statistics(cputime, T1),
    Count =:= 92,
    Seconds is T1 - T0.

main :-
    findall(S, (between(1, 3, _), time_once(S)), Times),
    min_list(Times, Best),
    format('{"name": "queens8", "metric": "time", "value": ~6f, "unit": "s"}~n', [Best]).
