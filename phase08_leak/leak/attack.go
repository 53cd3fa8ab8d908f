package leak

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"
)

// LeakConfig sizes the side-channel experiment.
type LeakConfig struct {
	Secret    int    // tokens of the victim's secret system prompt
	Calibrate int    // right/wrong pairs the attacker learns its threshold on
	Trials    int    // held-out pairs the threshold is judged on
	Seed      uint64 // seeds every prompt
}

// LeakResult is what the attacker measured against one server.
type LeakResult struct {
	RightP50, WrongP50 time.Duration // held-out TTFT medians of right and wrong guesses
	Threshold          time.Duration // midpoint of the calibration medians
	Correct, Judged    int           // held-out guesses the threshold classified right, and all of them
	RightCached        int           // fewest cached tokens any right guess reported
	WrongCached        int           // most cached tokens any wrong guess reported
}

// Accuracy is the threshold's hit rate on held-out guesses: 1 tells right
// from wrong every time, 0.5 is a coin.
func (r LeakResult) Accuracy() float64 { return float64(r.Correct) / float64(r.Judged) }

// tokens returns n token ids drawn from rng, clear of the special ids at
// the bottom of the vocabulary.
func tokens(rng *rand.Rand, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(16 + rng.IntN(4000))
	}
	return t
}

// Attack runs the experiment on one server. In each pair a victim sends a
// fresh secret system prompt (then its own question) under victimSalt;
// the attacker, under attackerSalt, sends the right guess (the secret)
// and a wrong one (as long, never sent before), each followed by a
// question of its own, and times its first streamed chunk. Every guess is
// a prompt the attacker never sent before, so its own earlier requests
// cannot make a guess fast: only the victim's can.
func Attack(ctx context.Context, c Client, victimSalt, attackerSalt string, cfg LeakConfig) (LeakResult, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 17))
	var calRight, calWrong, right, wrong []time.Duration
	res := LeakResult{RightCached: -1}
	for i := -1; i < cfg.Calibrate+cfg.Trials; i++ { // pair -1 warms the server up
		secret := tokens(rng, cfg.Secret)
		if _, err := c.Send(ctx, victimSalt, append(slices.Clone(secret), tokens(rng, 24)...)); err != nil {
			return res, err
		}
		guesses := [2][]int32{
			append(slices.Clone(secret), tokens(rng, 8)...),
			append(tokens(rng, cfg.Secret), tokens(rng, 8)...),
		}
		var ttft [2]time.Duration
		for k := range 2 {
			g := (k + i) & 1 // alternate which guess goes first
			p, err := c.Send(ctx, attackerSalt, guesses[g])
			if err != nil {
				return res, err
			}
			ttft[g] = p.TTFT
			if i < cfg.Calibrate || i < 0 {
				continue
			}
			if g == 0 && (res.RightCached < 0 || p.Cached < res.RightCached) {
				res.RightCached = p.Cached
			}
			if g == 1 {
				res.WrongCached = max(res.WrongCached, p.Cached)
			}
		}
		switch {
		case i < 0:
		case i < cfg.Calibrate:
			calRight, calWrong = append(calRight, ttft[0]), append(calWrong, ttft[1])
		default:
			right, wrong = append(right, ttft[0]), append(wrong, ttft[1])
		}
	}
	res.Threshold = (median(calRight) + median(calWrong)) / 2
	res.RightP50, res.WrongP50 = median(right), median(wrong)
	for k := range right {
		if right[k] < res.Threshold {
			res.Correct++
		}
		if wrong[k] >= res.Threshold {
			res.Correct++
		}
	}
	res.Judged = 2 * len(right)
	return res, nil
}

// median returns the middle of d (the mean of the two middles for an even
// count); 0 for none.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
