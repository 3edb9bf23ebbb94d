//! What the search asks of inner engines, and two ways to answer: the engine pool, and a scripted evaluator for
//! exact, deterministic tests.

use std::time::Duration;

use shakmaty::{Chess, Position, uci::UciMove};

use crate::{
    engine::{EnginePool, EnginePosition, EvalRequest, JobOutcome, Limit, ScreenCut},
    score::{Bound, Score},
    store::key::PositionKey,
};

/// One fixed-depth search of a position, restricted to `searchmoves` when not empty.
#[derive(Debug, Clone)]
pub struct Job {
    pub position: Chess,
    pub searchmoves: Vec<UciMove>,
    pub depth: u8,
    /// Screening: the search may stop at a shallower iteration that scores below the screen's bound; its answer then
    /// has that iteration's depth, less than `depth`.
    pub screen: Option<ScreenCut>,
}

impl Job {
    /// A search of `position` at `depth`, restricted to `searchmoves` when not empty, not screened.
    pub fn new(position: Chess, searchmoves: Vec<UciMove>, depth: u8) -> Job {
        Job { position, searchmoves, depth, screen: None }
    }
}

/// The answer to a [`Job`]: the best of the searched moves and its score (side to move's point of view), the one
/// answer model of the store ([`crate::store::answer`]); its engine is named as [`Evaluator::engine_names`] names it.
pub use crate::store::answer::Answer;

/// Why a search gave no answer: its kind reaches the search, which counts engine failures (and retries their
/// positions in a later run) but not searches it cancelled itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The search could not be asked (a position or restriction the engines cannot take): no engine at fault.
    #[error("cannot be asked: {0}")]
    Refused(String),
    /// The engine failed the search (it died, hung or answered what was not asked), after the pool's retries.
    #[error("{0}")]
    Engine(String),
    /// Cancelled before its answer.
    #[error("cancelled")]
    Cancelled,
    /// The answers of moves searched alone could not be put together.
    #[error("{0}")]
    Incomplete(&'static str),
}

/// A source of evaluations that can run several at once.
pub trait Evaluator {
    /// How many jobs can run at once.
    fn workers(&self) -> usize;
    /// Starts a job; its answer comes from [`Evaluator::next`] tagged with `id`.
    fn submit(&mut self, id: u64, job: Job) -> Result<(), EvalError>;
    /// The next finished job, waiting at most `timeout`; `None` on timeout.
    fn next(&mut self, timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)>;
    /// Stops job `id` if it is still running (its answer, if one still arrives, is to be ignored). Returns whether it
    /// was stopped; an evaluator that cannot stop one job returns false and lets it finish.
    fn cancel(&mut self, _id: u64) -> bool {
        false
    }
    /// Abandons every job in flight (their answers may still arrive and are to be ignored).
    fn cancel_all(&mut self);
    /// The identity of the engine, recorded in the store.
    fn identity(&self) -> String;
    /// The names of the engines that may answer, as their answers name them: each stored evaluation records its
    /// engine by its number in the store's list of these names.
    fn engine_names(&self) -> Vec<String> {
        vec![self.identity()]
    }
}

/// The inner-engine pool as an evaluator.
pub struct PoolEvaluator {
    pool: EnginePool,
    in_flight: Vec<u64>,
    /// Where a [`Waker`] ends a wait for results.
    wake: (crossbeam_channel::Sender<()>, crossbeam_channel::Receiver<()>),
}

/// Ends a [`PoolEvaluator`]'s wait for its engines' answers at once, from another thread: it returns from
/// [`Evaluator::next`] as on a timeout, and its caller looks at its budget (a `stop` among it) without waiting for an
/// engine. A wake that finds no wait ends the next one.
#[derive(Clone)]
pub struct Waker(crossbeam_channel::Sender<()>);

impl Waker {
    pub fn wake(&self) {
        let _ = self.0.try_send(());
    }
}

impl PoolEvaluator {
    pub fn new(pool: EnginePool) -> PoolEvaluator {
        PoolEvaluator { pool, in_flight: Vec::new(), wake: crossbeam_channel::bounded(1) }
    }

    /// Wakes this evaluator's [`Evaluator::next`] from another thread (see [`Waker`]).
    pub fn waker(&self) -> Waker {
        Waker(self.wake.0.clone())
    }

    /// The nodes the pool's engines have searched so far (see [`EnginePool::searched_nodes`]).
    pub fn searched_nodes(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.pool.searched_nodes()
    }
}

impl Evaluator for PoolEvaluator {
    fn workers(&self) -> usize {
        self.pool.workers()
    }

    fn submit(&mut self, id: u64, job: Job) -> Result<(), EvalError> {
        let request = EvalRequest::new(EnginePosition::of(&job.position), Limit::Depth(u32::from(job.depth)))
            .with_searchmoves(job.searchmoves)
            .map_err(|e| EvalError::Refused(e.to_string()))?
            .with_screen(job.screen);
        self.pool.submit(id, request).map_err(|e| EvalError::Refused(e.to_string()))?;
        self.in_flight.push(id);
        Ok(())
    }

    fn next(&mut self, timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        // A wake (a `stop` from another thread) ends the wait as a timeout does: the caller looks at its budget now.
        // An answer already in is taken first (biased), so a stop never drops a search that has answered.
        let result = crossbeam_channel::select_biased! {
            recv(self.pool.results()) -> result => result.ok()?,
            recv(self.wake.1) -> _ => return None,
            default(timeout) => return None,
        };
        self.in_flight.retain(|id| *id != result.id);
        let label = result.worker.and_then(|w| self.pool.identity(w)).map(|i| i.label());
        let answer = match result.outcome {
            // A search its screen stopped answers with the iteration that stopped it.
            // An answer asked another way than `searchmoves` is kept under the engine's label marked by its method.
            JobOutcome::Done(eval) => Ok(Answer::of_evaluation(&eval, label.map(|l| l + eval.asked.label_suffix()))),
            JobOutcome::Failed(e) => Err(EvalError::Engine(e.to_string())),
            JobOutcome::Cancelled => Err(EvalError::Cancelled),
        };
        Some((result.id, answer))
    }

    fn cancel(&mut self, id: u64) -> bool {
        self.in_flight.retain(|i| *i != id);
        self.pool.cancel(id)
    }

    fn cancel_all(&mut self) {
        for id in self.in_flight.drain(..) {
            self.pool.cancel(id);
        }
    }

    fn identity(&self) -> String {
        self.pool.identities().first().map(|i| i.name.clone()).unwrap_or_else(|| "unknown engine".to_owned())
    }

    fn engine_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.pool.identities().iter().map(|i| i.label()).collect();
        names.dedup();
        names
    }
}

/// A deterministic evaluator: the score of a move depends only on the position and the move (a hash), so any
/// order of evaluation gives the same answers. Answers come back in a seeded random order, as a pool's would.
///
/// A screened job ([`Job::screen`]) is answered at the screen's depth when the best of its moves, scored at that
/// depth, is below the screen's bound; the score at a screened depth is the score at full depth plus
/// [`ScriptedEvaluator::shallow_error`] (none by default).
pub struct ScriptedEvaluator {
    workers: usize,
    pending: Vec<(u64, Result<Answer, EvalError>)>,
    rng: fastrand::Rng,
    /// Evaluations answered so far.
    pub evaluations: u64,
    /// How far a shallower search of a move in a position is off its full-depth score, in centipawns.
    pub shallow_error: Option<fn(&Chess, &UciMove) -> i32>,
}

impl ScriptedEvaluator {
    pub fn new(workers: usize, seed: u64) -> ScriptedEvaluator {
        ScriptedEvaluator {
            workers: workers.max(1),
            pending: Vec::new(),
            rng: fastrand::Rng::with_seed(seed),
            evaluations: 0,
            shallow_error: None,
        }
    }

    /// The scripted score of `uci` in `pos`, for the side to move: a hash of the child position spread over
    /// -60..60 cp, so transpositions agree.
    pub fn move_score(pos: &Chess, uci: &UciMove) -> Option<Score> {
        let child = crate::game::play_uci(pos, uci)?;
        let key = PositionKey::of(&child).0;
        let spread = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 121;
        Some(Score::cp(spread as i32 - 60))
    }

    /// A smoother scripted score of `uci` in `pos`, for the side to move: the negated static value of the position it
    /// leads to (material, a little piece placement, and up to 10 cp of noise from its key). Unlike
    /// [`ScriptedEvaluator::move_score`], the value of a position found by searching it is close to the negated score
    /// of the move that led to it, as with a real engine, so deeper plies move values by tens of centipawns, not by
    /// up to 120.
    pub fn smooth_move_score(pos: &Chess, uci: &UciMove) -> Option<Score> {
        let child = crate::game::play_uci(pos, uci)?;
        // Sign flip: the static value is the child's side to move's; the move's score is the mover's.
        Some(Score::cp(-static_value(&child)))
    }

    /// The answer to `job`: the best of its moves at full depth, or for a screened job, at the screen's depth when
    /// that is below the screen's bound. A screened answer reports a quarter of the nodes.
    pub fn answer_to(&self, job: &Job) -> Result<Answer, EvalError> {
        let candidates: Vec<UciMove> = if job.searchmoves.is_empty() {
            job.position.legal_moves().iter().map(|m| crate::notation::canonical(*m)).collect()
        } else {
            job.searchmoves.clone()
        };
        let best_of = |error: Option<fn(&Chess, &UciMove) -> i32>| {
            candidates
                .iter()
                .filter_map(|m| {
                    let score = ScriptedEvaluator::move_score(&job.position, m)?;
                    Some((score.minus_cp(-error.map_or(0, |e| e(&job.position, m))), *m))
                })
                .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.to_string().cmp(&a.1.to_string())))
        };
        let answer = |(score, best): (Score, UciMove), depth: u8, nodes: u64| Answer {
            best,
            score,
            bound: Bound::Exact,
            depth,
            nodes,
            engine: Some("scripted".to_owned()),
        };
        if let Some(cut) = job.screen
            && let Some(screened) = best_of(self.shallow_error).filter(|(score, _)| *score < cut.below)
        {
            return Ok(answer(screened, cut.from_depth.min(255) as u8, 250));
        }
        best_of(None)
            .map(|best| answer(best, job.depth, 1000))
            .ok_or_else(|| EvalError::Refused("no legal move".to_owned()))
    }
}

/// Material and piece placement from the side to move's point of view, plus noise from the position's key.
fn static_value(pos: &Chess) -> i32 {
    use shakmaty::{Color, Role};
    let board = pos.board();
    let mut white = 0i32;
    for square in board.occupied() {
        let Some(piece) = board.piece_at(square) else { continue };
        let file = i32::from(u8::from(square.file()));
        let rank = i32::from(u8::from(square.rank()));
        // Distance from the centre: 0 on d4-e5, 3 on the rim.
        let rim = (2 * file - 7).abs().max((2 * rank - 7).abs()) / 2;
        let forward = if piece.color == Color::White { rank } else { 7 - rank };
        let value = match piece.role {
            Role::Pawn => 100 + if (3..=4).contains(&file) { 6 * forward.min(3) } else { 2 * forward.min(3) },
            Role::Knight => 300 + 8 * (3 - rim),
            Role::Bishop => 310 + 5 * (3 - rim),
            Role::Rook => 500,
            Role::Queen => 900 + 2 * (3 - rim),
            Role::King => {
                if forward == 0 {
                    0
                } else {
                    -15
                }
            }
        };
        white += if piece.color == Color::White { value } else { -value };
    }
    let noise = (PositionKey::of(pos).0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 21;
    let own = if pos.turn() == Color::White { white } else { -white };
    own + noise as i32 - 10
}

impl Evaluator for ScriptedEvaluator {
    fn workers(&self) -> usize {
        self.workers
    }

    fn submit(&mut self, id: u64, job: Job) -> Result<(), EvalError> {
        self.evaluations += 1;
        let answer = self.answer_to(&job);
        self.pending.push((id, answer));
        Ok(())
    }

    fn next(&mut self, _timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        if self.pending.is_empty() {
            return None;
        }
        let i = self.rng.usize(..self.pending.len());
        Some(self.pending.swap_remove(i))
    }

    fn cancel(&mut self, id: u64) -> bool {
        let before = self.pending.len();
        self.pending.retain(|(pending, _)| *pending != id);
        self.pending.len() < before
    }

    fn cancel_all(&mut self) {
        self.pending.clear();
    }

    fn identity(&self) -> String {
        "scripted".to_owned()
    }
}

impl<E: Evaluator + ?Sized> Evaluator for &mut E {
    fn workers(&self) -> usize {
        (**self).workers()
    }

    fn submit(&mut self, id: u64, job: Job) -> Result<(), EvalError> {
        (**self).submit(id, job)
    }

    fn next(&mut self, timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        (**self).next(timeout)
    }

    fn cancel(&mut self, id: u64) -> bool {
        (**self).cancel(id)
    }

    fn cancel_all(&mut self) {
        (**self).cancel_all()
    }

    fn identity(&self) -> String {
        (**self).identity()
    }

    fn engine_names(&self) -> Vec<String> {
        (**self).engine_names()
    }
}
