# SPDX-License-Identifier: MIT
# fragsim: histogram of request sizes, in power-of-two classes.
#
# gnuplot -c sizes.gp DATA OUT FORMAT TITLE
#   DATA   one line per size class [2^k, 2^(k+1)): k label requests percent_of_bytes
#   TITLE  the title (enhanced text, already escaped)
reset
DATA = ARG1
if (ARG3 eq "svg") {
    set terminal svg size 1200,600 dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1200,600 enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",12"
set xlabel "request size (at least)"
set ylabel "requests"
set y2label "share of requested bytes (%)"
set border 11 lc rgb "#555555"
set tics out
set ytics nomirror
set y2tics
set xtics noenhanced rotate by -45 scale 0
set grid ytics lc rgb "#e0e0e0" lw 1 dt 1
set style fill solid 0.85 border lc rgb "#333333"
set boxwidth 0.75
set yrange [0:*]
set y2range [0:100]
set key top left Left reverse opaque box lc rgb "#cccccc"
plot DATA using 0:3:xtic(2) with boxes lc rgb "#4e79a7" title "requests", \
     DATA using 0:4 axes x1y2 with linespoints lw 2 pt 7 ps 0.8 lc rgb "#e15759" \
         title "share of requested bytes"
unset output
