# SPDX-License-Identifier: MIT
# fragsim: the segments at one moment of `fragsim explain`, one horizontal bar each: live bytes,
# rounding, free releasable and free pinned bytes in four colours; the live blocks that pin free
# memory outlined; at an OOM, the request drawn to scale on the top bar.
#
# gnuplot -c explain.gp DATA OUT FORMAT TITLE BARS XMAX REQUEST
#   DATA   block 0: fills "x0 x1 y0 y1 colour" (MiB from the segment's start; colour 0 live,
#          1 rounding, 2 releasable, 3 pinned); block 1: outlines of pinning blocks; block 2: the
#          request (or NaN)
#   TITLE  the title (enhanced text, already escaped)
#   BARS   how many segments are drawn; XMAX the widest bar in MiB; REQUEST 1 at an OOM, else 0
DATA = ARG1
BARS = int(ARG5)
XMAX = real(ARG6)
REQUEST = int(ARG7)
HEIGHT = 160 + 16 * (BARS + 2)
if (HEIGHT < 420) { HEIGHT = 420 }
if (ARG3 eq "svg") {
    set terminal svg size 1100,HEIGHT dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1100,HEIGHT enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",13"
set xlabel "offset in the segment (MiB)"
set ylabel "segments"
set border 3 lc rgb "#555555"
set tics nomirror out
unset ytics
set xrange [0:XMAX * 1.02]
set yrange [0:BARS + 2.5]
set key outside below center horizontal samplen 2
set palette maxcolors 4
set palette defined (0 "#4e79a7", 1 "#f2b134", 2 "#8cd17d", 3 "#e15759")
set cbrange [-0.5:3.5]
unset colorbox
plot \
    DATA index 0 using (($1+$2)/2):(($3+$4)/2):1:2:3:4:5 with boxxyerror \
        fs solid 0.9 noborder lc palette notitle, \
    DATA index 1 using (($1+$2)/2):(($3+$4)/2):1:2:3:4 with boxxyerror \
        fs empty border lc rgb "#222222" lc rgb "#222222" lw 1.5 title "live blocks that pin free memory", \
    DATA index 2 using (($1+$2)/2):(($3+$4)/2):1:2:3:4 with boxxyerror \
        fs pattern 4 border lc rgb "#d62728" lc rgb "#d62728" title (REQUEST ? "the request at the OOM" : ""), \
    NaN with boxes fs solid 0.9 lc rgb "#4e79a7" title "live (requested)", \
    NaN with boxes fs solid 0.9 lc rgb "#f2b134" title "rounding", \
    NaN with boxes fs solid 0.9 lc rgb "#8cd17d" title "free, releasable", \
    NaN with boxes fs solid 0.9 lc rgb "#e15759" title "free, pinned"
