% Peer of benchmarks/parlog/mastermind.par for SWI-Prolog: the same code breaker (4 pegs,
% 6 colours: the codes in order, the first one consistent with every guess so far is the
% next guess, each guess filters the whole rest of the list) for the secrets 0, 50, ...,
% 1250, run as ordinary Prolog, one secret after another.
% swipl -q -g main -t halt mastermind.pl prints one JSON line: the CPU time of one full run,
% best of 3.

step(50).

gen(I, N, [C|Cs]) :- I < N, !, I1 is I + 1, code(I, 4, C), gen(I1, N, Cs).
gen(_, _, []).

code(I, K, [D|Ds]) :- K > 0, !, K1 is K - 1, D is I mod 6 + 1, I1 is I // 6, code(I1, K1, Ds).
code(_, 0, []).

score(A, B, S) :- blacks(A, B, 0, Bl), colours(6, A, B, 0, T), S is 10 * Bl + T - Bl.

blacks([X|Xs], [Y|Ys], N0, N) :- X =:= Y, !, N1 is N0 + 1, blacks(Xs, Ys, N1, N).
blacks([_|Xs], [_|Ys], N0, N) :- !, blacks(Xs, Ys, N0, N).
blacks([], [], N, N).

colours(C, A, B, T0, T) :- C > 0, !, C1 is C - 1,
    count(A, C, 0, NA), count(B, C, 0, NB), T1 is T0 + min(NA, NB), colours(C1, A, B, T1, T).
colours(0, _, _, T, T).

count([X|Xs], C, N0, N) :- X =:= C, !, N1 is N0 + 1, count(Xs, C, N1, N).
count([_|Xs], C, N0, N) :- !, count(Xs, C, N0, N).
count([], _, N, N).

filter([X|Xs], G, S, Ys) :- score(X, G, SX), keep(SX, S, X, Xs, G, Ys).
filter([], _, _, []).

keep(SX, S, X, Xs, G, [X|Ys]) :- SX =:= S, !, filter(Xs, G, S, Ys).
keep(_, S, _, Xs, G, Ys) :- filter(Xs, G, S, Ys).

breaker([G|Cs], Secret, K0, K) :- score(G, Secret, S), K1 is K0 + 1, found(S, G, Cs, Secret, K1, K).

found(40, _, _, _, K, K) :- !.
found(S, G, Cs, Secret, K0, K) :- filter(Cs, G, S, Cs1), breaker(Cs1, Secret, K0, K).

solve(I, Step, [K|Ks]) :- I < 1296, !, I1 is I + Step,
    code(I, 4, Secret), gen(0, 1296, Codes), breaker(Codes, Secret, 0, K), solve(I1, Step, Ks).
solve(_, _, []).

stats([K|Ks], N0, T0, M0, R) :- N1 is N0 + 1, T1 is T0 + K, M1 is max(M0, K), stats(Ks, N1, T1, M1, R).
stats([], N, T, M, [N, T, M]).

run(Step, R) :- solve(0, Step, Ks), stats(Ks, 0, 0, 0, R).

time_once(Seconds) :-
    step(Step),
    garbage_collect,
    statistics(cputime, T0),
    run(Step, R),
    statistics(cputime, T1),
    R == [26, 145, 8],
    Seconds is T1 - T0.

main :-
    findall(S, (between(1, 3, _), time_once(S)), Times),
    min_list(Times, Best),
    format('{"name": "mastermind", "metric": "time", "value": ~6f, "unit": "s"}~n', [Best]).
