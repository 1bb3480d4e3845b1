% Peer of benchmarks/parlog/sieve.par for SWI-Prolog: the same sieve to 120,000 (a filter per
% prime, applied to the whole stream of the integers), run as ordinary Prolog.
% swipl -q -g main -t halt sieve.pl prints one JSON line: the CPU time of one full run,
% best of 3.

size(120000).

gen(N, Max, [N|Ns]) :- N =< Max, !, N1 is N + 1, gen(N1, Max, Ns).
gen(_, _, []).

sift([P|Xs], [P|Ps]) :- filter(Xs, P, Ys), sift(Ys, Ps).
sift([], []).

filter([X|Xs], P, Ys) :- X mod P =:= 0, !, filter(Xs, P, Ys).
filter([X|Xs], P, [X|Ys]) :- !, filter(Xs, P, Ys).
filter([], _, []).

count([_|Xs], N0, N) :- N1 is N0 + 1, count(Xs, N1, N).
count([], N, N).

run(Max, N) :- gen(2, Max, Ns), sift(Ns, Ps), count(Ps, 0, N).

time_once(Seconds) :-
    size(Max),
    garbage_collect,
    statistics(cputime, T0),
    run(Max, Count),
    statistics(cputime, T1),
    Count =:= 11301,
    Seconds is T1 - T0.

main :-
    findall(S, (between(1, 3, _), time_once(S)), Times),
    min_list(Times, Best),
    format('{"name": "sieve120k", "metric": "time", "value": ~6f, "unit": "s"}~n', [Best]).
