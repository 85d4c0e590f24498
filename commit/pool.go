package commit

import (
	"sync"
)

// The writer pool of a batch, shared by Apply and the group writer: records
// are written by at most Options.Writers goroutines at once, so that the
// filesystem can merge their journal commits.

// writers is the size of the writer pool for jobs jobs.
func (s *Store) writers(jobs int) int {
	return max(1, min(s.pool, jobs))
}

// parallel runs do(j) for every j of jobs, taken in order by the writer
// pool, and returns when all are done.
func (s *Store) parallel(jobs []int, do func(j int)) {
	s.InParallel(s.writers(len(jobs)), jobs, do)
}

// InParallel is parallel with n goroutines.
func (s *Store) InParallel(n int, jobs []int, do func(j int)) {
	n = max(1, min(n, len(jobs)))
	if n == 1 {
		// One writer (a worker's one claim, its done): in this goroutine,
		// without a goroutine to start and a channel to hand each job over.
		for _, j := range jobs {
			do(j)
		}
		return
	}
	if s.moreProcs != nil {
		defer s.moreProcs(n)()
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				do(j)
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
}
