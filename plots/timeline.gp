# SPDX-License-Identifier: MIT
# fragsim: allocated and reserved memory over time, one colour per run.
#
# gnuplot -c timeline.gp DATA OUT FORMAT TITLE XLABEL UNIT N COLOURS OOMS
#   DATA     one block (gnuplot index) per run, its first line a header whose 7th field is the
#            run's label; columns: x reserved allocated requested overhead frag (memory in UNIT)
#   OUT      the image to write; FORMAT png or svg
#   TITLE    the title (enhanced text, already escaped)
#   XLABEL   the x axis label; UNIT the memory unit (GiB, MiB...)
#   N        the number of runs; COLOURS their colours, space-separated
#   OOMS     a file of simulated OOMs (x, reserved, colour as an integer), or - for none
# Written by `fragsim plot`, which keeps the data files next to the images: edit and rerun
# plots.sh there.
reset
DATA = ARG1
N = int(ARG7)
COLOURS = ARG8
OOMS = ARG9
# The legend goes below the plot, two entries a row: the canvas grows with the runs.
HEIGHT = 560 + 22 * ((N + 4) / 2)
if (ARG3 eq "svg") {
    set terminal svg size 1200,HEIGHT dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1200,HEIGHT enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",12"
set xlabel ARG5
set ylabel sprintf("memory (%s)", ARG6)
set border 3 lc rgb "#555555"
set tics nomirror out
set format x "%g"
set format y "%g"
set grid xtics ytics lc rgb "#e0e0e0" lw 1 dt 1
set key outside below center horizontal maxcols 2 Left reverse samplen 3 spacing 1.1
set autoscale xfix
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
OOMPLOT = (OOMS eq "-") ? "" : \
    sprintf(", '%s' using 1:2:3 with points pt 9 ps 1.8 lc rgb variable title 'simulated OOM (at the reserved memory then)'", OOMS)
plot \
    DATA index 0 using 1:4 with lines lw 1 lc rgb "#9a9a9a" title "requested by the program", \
    for [i=0:N-1] DATA index i using 1:2 with lines lw 2.5 lc rgb word(COLOURS, i+1) \
        title columnheader(7) noenhanced, \
    for [i=0:N-1] DATA index i using 1:3 with lines lw 1 dt 3 lc rgb word(COLOURS, i+1) notitle, \
    NaN with lines lw 2.5 lc rgb "#555555" title "reserved (solid)", \
    NaN with lines lw 1 dt 3 lc rgb "#555555" title "allocated (dotted)" @OOMPLOT
unset output
