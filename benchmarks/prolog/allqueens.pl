% Peer of benchmarks/parlog/allqueens.par for SWI-Prolog: all 8-queens solutions with
% findall/3 over the same relation (no cuts, no indexing help beyond SWI's own).
% swipl -q -g main -t halt allqueens.pl prints one JSON line: the CPU time of one
% full run, best of 3.

queens(N, Qs) :- range(1, N, Ns), queens(Ns, [], Qs).
queens([], Qs, Qs).
queens(Unplaced, Safe, Qs) :- sel(Q, Unplaced, R), not_attack(Safe, Q, 1), queens(R, [Q|Safe], Qs).
not_attack([], _, _).
not_attack([Y|Ys], X, N) :- X =\= Y + N, X =\= Y - N, N1 is N + 1, not_attack(Ys, X, N1).
sel(X, [X|Xs], Xs).
sel(X, [Y|Ys], [Y|Zs]) :- sel(X, Ys, Zs).
range(N, N, [N]).
range(M, N, [M|Ns]) :- M < N, M1 is M + 1, range(M1, N, Ns).

time_once(Seconds) :-
    garbage_collect,
    statistics(cputime, T0),
    findall(Qs, queens(8, Qs), All),
    statistics(cputime, T1),
    length(All, 92),
    Seconds is T1 - T0.

main :-
    findall(S, (between(1, 3, _), time_once(S)), Times),
    min_list(Times, Best),
    format('{"name": "allqueens8", "metric": "time", "value": ~6f, "unit": "s"}~n', [Best]).
