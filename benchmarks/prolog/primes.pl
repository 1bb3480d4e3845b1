% Peer of benchmarks/parlog/primes.par for SWI-Prolog: the same sieve (one
% filter per prime, applied to the whole stream 2..10000), run as ordinary
% Prolog. swipl -q -g main -t halt primes.pl prints one JSON line: the CPU time
% of one full run, best of 3.

integers(N, Max, []) :- N > Max, !.
integers(N, Max, [N|Ns]) :- N1 is N + 1, integers(N1, Max, Ns).

sift([], []).
sift([P|Xs], [P|Ps]) :- filter(Xs, P, Ys), sift(Ys, Ps).

filter([], _, []).
filter([X|Xs], P, Ys) :- X mod P =:= 0, !, filter(Xs, P, Ys).
filter([X|Xs], P, [X|Ys]) :- filter(Xs, P, Ys).

count([], N, N).
count([_|Xs], N0, N) :- N1 is N0 + 1, count(Xs, N1, N).

time_once(Seconds) :-
    garbage_collect,
    statistics(cputime, T0),
    integers(2, 10000, Ns),
    sift(Ns, Ps),
    count(Ps, 0, Count),
    statistics(cputime, T1),
    Count =:= 1229,
    Seconds is T1 - T0.

main :-
    findall(S, (between(1, 3, _), time_once(S)), Times),
    min_list(Times, Best),
    format('{"name": "primes", "metric": "time", "value": ~6f, "unit": "s"}~n', [Best]).
