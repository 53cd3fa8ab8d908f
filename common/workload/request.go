package workload

import "time"

// Request is one request of a workload.
//
// A follow-up turn of a conversation cannot know its prompt in advance,
// because the prompt includes the model's previous answer. Such a request has
// a FollowUp, its Prompt is empty, and Run builds the prompt when the
// previous turn finishes.
type Request struct {
	ID int
	// Arrival is measured from the start of the run. For a follow-up it is
	// only a lower bound; see FollowUp.
	Arrival   time.Duration
	Prompt    []int32
	MaxTokens int
	FollowUp  *FollowUp
}

// FollowUp makes a request the next turn of a conversation.
//
// Its prompt is the previous turn's prompt, then the previous turn's
// generated tokens, then UserTokens, exactly what a chat client resends. It
// is released at max(Arrival, previous turn's finish + Think): the user reads
// the answer before typing again.
type FollowUp struct {
	// Prev is the ID of the previous turn.
	Prev       int
	UserTokens []int32
	Think      time.Duration
}
