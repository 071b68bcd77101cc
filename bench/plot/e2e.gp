# The end-to-end benefit curve: all-reduce time against size, in-network
# (cais), the agent's ring and MPI_Allreduce, one panel per rank count.
#   gnuplot -e "in='bench/results/e2e.csv'; out='bench/results/e2e.png'" bench/plot/e2e.gp
# The CSV is bench/e2e.sh --csv: ranks,bytes,cais_us,ring_us,mpi_us,cais_vs_ring,cais_vs_mpi,cais_path
if (!exists("in")) in = 'bench/results/e2e.csv'
if (!exists("out")) out = 'bench/results/e2e.png'
set terminal pngcairo size 1400,560 font ",10"
set output out
set datafile separator ","
set logscale xy 2
set grid
set key top left
set xlabel "all-reduce size (MiB)"
set ylabel "median time (ms)"
stats in using 1 nooutput
rmin = STATS_min
rmax = STATS_max
set multiplot layout 1,(rmin == rmax ? 1 : 2) title "all-reduce (float, sum) through cais-switch on the namespace testbed"
do for [r in sprintf("%d %d", rmin, rmax)] {
	if (r + 0 != rmin || rmin != rmax || r eq sprintf("%d", rmin)) {
		set title sprintf("%s ranks", r)
		plot in using ($1 == r ? $2 / 1048576.0 : NaN):($3 / 1000) with linespoints lw 2 pt 7 title "cais (in-network)", \
		     in using ($1 == r ? $2 / 1048576.0 : NaN):($4 / 1000) with linespoints lw 2 pt 5 title "agent ring", \
		     in using ($1 == r && $5 > 0 ? $2 / 1048576.0 : NaN):($5 / 1000) with linespoints lw 2 pt 9 title "MPI_Allreduce (OpenMPI, TCP)"
	}
	if (rmin == rmax) { break }
}
unset multiplot
