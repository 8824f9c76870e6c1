# SPDX-License-Identifier: MIT
# fragsim: fragmentation over time, one colour per run, in two panels: the memory reserved
# beyond what the program asked for (reserved - requested), and the share of reserved memory no
# block holds (1 - allocated / reserved; not the metric external_frag_at_peak, which is
# 1 - largest free block / free memory).
#
# gnuplot -c fragmentation.gp DATA OUT FORMAT TITLE XLABEL UNIT N COLOURS
#   DATA     the data of timeline.gp (one block per run: x reserved allocated requested overhead
#            frag, a header whose 7th field is the run's label)
#   the other arguments as for timeline.gp.
reset
DATA = ARG1
N = int(ARG7)
COLOURS = ARG8
HEIGHT = 860 + 22 * ((N + 1) / 2)
if (ARG3 eq "svg") {
    set terminal svg size 1200,HEIGHT dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1200,HEIGHT enhanced font "sans,11" background rgb "white"
}
set output ARG2
set border 3 lc rgb "#555555"
set tics nomirror out
set grid xtics ytics lc rgb "#e0e0e0" lw 1 dt 1
set format x "%g"
set format y "%g"
# One legend, below the second panel: the colours are the same in both.
unset key
set multiplot layout 2,1 title ARG4 font ",12"
set title "Memory reserved beyond what the program asked for (reserved - requested)" font ",11"
set ylabel sprintf("overhead (%s)", ARG6)
set autoscale xfix
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
plot for [i=0:N-1] DATA index i using 1:5 with lines lw 2 lc rgb word(COLOURS, i+1) \
    title columnheader(7) noenhanced
set title "Reserved but not allocated: the share of reserved memory no block holds (1 - allocated / reserved)" font ",11"
set ylabel "reserved, not allocated (%)"
set key outside below center horizontal maxcols 2 Left reverse samplen 3
set xlabel ARG5
set yrange [0:100]
set offsets 0, 0, 0, 0
plot for [i=0:N-1] DATA index i using 1:6 with lines lw 1.5 lc rgb word(COLOURS, i+1) \
    title columnheader(7) noenhanced
unset multiplot
unset output
