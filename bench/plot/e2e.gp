# The end-to-end benefit curve: all-reduce time against size, one line per
# way that bench/e2e.sh measured (in-network per wire type, the agent's ring,
# gloo, MPI_Allreduce), one panel per rank count.
#   gnuplot -e "in='bench/results/e2e.csv'; out='bench/results/e2e.png'" bench/plot/e2e.gp
# The CSV is bench/e2e.sh --csv: ranks,bytes, then one WAY_us column per way
# (0: not run), then per wire type its path, retransmitted share and bytes
# per element.
if (!exists("in")) in = 'bench/results/e2e.csv'
if (!exists("out")) out = 'bench/results/e2e.png'
set terminal pngcairo size 1400,560 font ",10"
set output out
set termoption noenhanced
set datafile separator ","
set logscale xy 2
set grid
set key top left
set xlabel "all-reduce size (MiB)"
set ylabel "median time (ms)"
# the rows of one rank count, in the order of size
rows(r) = sprintf("< awk -F, 'NR > 1 && $1 == %s' %s", r, in)
ranks = system(sprintf("awk -F, 'NR > 1 { print $1 }' %s | sort -un | tr '\\n' ' '", in))
# the time columns: header names ending in _us, as "column:name" words
ways = system(sprintf("head -n 1 %s | tr ',' '\\n' | awk '/_us$/ { sub(/_us$/, \"\"); print NR \":\" $0 }' | tr '\\n' ' '", in))
wcol(w) = int(system(sprintf("echo %s | cut -d: -f1", w)))
wname(w) = system(sprintf("echo %s | cut -d: -f2", w))
set multiplot layout 1, words(ranks) title "all-reduce (sum) through cais-switch on the namespace testbed"
do for [r in ranks] {
	set title sprintf("%s ranks", r)
	plot for [w in ways] rows(r) using ($2 / 1048576.0):(column(wcol(w)) > 0 ? column(wcol(w)) / 1000 : 1/0) \
		with linespoints lw 2 title wname(w)
}
unset multiplot
