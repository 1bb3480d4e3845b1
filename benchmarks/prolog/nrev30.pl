% Peer of benchmarks/parlog/nrev30.par for SWI-Prolog: naive reverse of a
% 30-element list (496 logical inferences per run: 31 nrev/2 + 465 app/3 calls).
% swipl -q -g main -t halt nrev30.pl prints one JSON line with the LIPS figure,
% 496 * Iterations / CPU seconds, the iterations doubled until the run takes >= 0.5 s.

range(N, M, []) :- N > M, !.
range(N, M, [N|Ns]) :- N1 is N + 1, range(N1, M, Ns).

app([], Ys, Ys).
app([X|Xs], Ys, [X|Zs]) :- app(Xs, Ys, Zs).

nrev([], []).
nrev([X|Xs], Ys) :- nrev(Xs, Rs), app(Rs, [X], Ys).

loop(0, _) :- !.
loop(N, L) :- nrev(L, _), N1 is N - 1, loop(N1, L).

% run(Iterations, Seconds): CPU time of Iterations nrev30s.
run(Iterations, Seconds) :-
    range(1, 30, L),
    garbage_collect,
    statistics(cputime, T0),
    loop(Iterations, L),
    statistics(cputime, T1),
    Seconds is T1 - T0.

% bench(Iterations): reports 496 * Iterations / CPU time, for a fixed count.
bench(Iterations) :-
    run(Iterations, Seconds),
    Lips is 496 * Iterations / max(Seconds, 1.0e-9),
    format('{"name": "nrev30", "metric": "lips", "value": ~1f, "unit": "LIPS"}~n', [Lips]).

calibrate(I0, I) :-
    run(I0, S),
    (   S >= 0.5
    ->  I = I0
    ;   I1 is I0 * 2, calibrate(I1, I)
    ).

main :-
    calibrate(1000, I),
    bench(I).
