//! The messages sent to a chat model: the grounding prompt, with the passages numbered so the
//! model can cite them as `[n]`, and the prompt that condenses a follow-up into a standalone
//! question.

use std::fmt::Write;

use super::{Grounding, Turn};

/// Who says a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Instructions.
    System,
    /// The person asking.
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The name the chat-completions protocol uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl ChatMessage {
    fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

const ANSWER_INSTRUCTIONS: &str = "You answer questions using only the numbered passages \
below, taken from the user's documents. Cite every statement with the number of the passage \
it comes from in square brackets, like [1] or [2][3], right after the statement. If the \
passages do not contain the answer, say that the documents available do not answer the \
question, and do not answer from your own knowledge. Answer in the language of the \
question, concisely.";

/// The conversation for answering `grounding`: instructions with the numbered passages, the
/// earlier exchanges, then the question.
pub fn answer_messages(grounding: &Grounding) -> Vec<ChatMessage> {
    let mut system = String::from(ANSWER_INSTRUCTIONS);
    system.push_str("\n\nPassages:\n");
    for p in &grounding.passages {
        let _ = write!(system, "\n[{}] {}", p.index, p.document_name);
        if let Some(page) = p.page {
            let _ = write!(system, ", page {page}");
        }
        if let Some(section) = p.section.as_deref().filter(|s| !s.is_empty()) {
            let _ = write!(system, ", section \"{section}\"");
        }
        let _ = write!(system, "\n{}\n", p.content.trim());
    }
    if grounding.passages.is_empty() {
        system.push_str("\n(no passages were found)\n");
    }
    let mut messages = vec![ChatMessage::new(Role::System, system)];
    for turn in &grounding.history {
        messages.push(ChatMessage::new(Role::User, turn.question.clone()));
        messages.push(ChatMessage::new(Role::Assistant, turn.answer.clone()));
    }
    messages.push(ChatMessage::new(Role::User, grounding.question.clone()));
    messages
}

const CONDENSE_INSTRUCTIONS: &str = "Rewrite the user's last question as one standalone \
question that can be understood without the conversation: replace pronouns and references \
with what they refer to. Reply with the question only, no preamble.";

/// The conversation asking a model to turn `question`, a follow-up to `history`, into a
/// standalone question.
pub fn condense_messages(history: &[Turn], question: &str) -> Vec<ChatMessage> {
    let mut transcript = String::new();
    for turn in history {
        let _ = writeln!(transcript, "User: {}", turn.question.trim());
        let _ = writeln!(transcript, "Assistant: {}", turn.answer.trim());
    }
    let _ = write!(transcript, "User (last question): {}", question.trim());
    vec![
        ChatMessage::new(Role::System, CONDENSE_INSTRUCTIONS),
        ChatMessage::new(Role::User, transcript),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::Passage;

    fn passage(index: usize, page: Option<u32>) -> Passage {
        Passage {
            index,
            document_name: "manual.pdf".into(),
            page,
            section: Some("Safety".into()),
            content: format!("text {index}"),
            score: 1.0,
        }
    }

    #[test]
    fn passages_are_numbered_with_their_page_and_history_comes_before_the_question() {
        let grounding = Grounding {
            question: "What then?".into(),
            history: vec![Turn {
                question: "How is the pump primed?".into(),
                answer: "With water [1].".into(),
            }],
            passages: vec![passage(1, Some(4)), passage(2, None)],
        };
        let messages = answer_messages(&grounding);
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[0].role, Role::System);
        assert!(
            messages[0]
                .content
                .contains("[1] manual.pdf, page 4, section \"Safety\"\ntext 1")
        );
        assert!(
            messages[0]
                .content
                .contains("[2] manual.pdf, section \"Safety\"\ntext 2")
        );
        assert_eq!(messages[1].content, "How is the pump primed?");
        assert_eq!(messages[2].role, Role::Assistant);
        assert_eq!(messages[3].content, "What then?");
    }

    #[test]
    fn condensing_shows_the_transcript_and_the_last_question() {
        let history = [Turn {
            question: "What is ibuprofen?".into(),
            answer: "A painkiller [1].".into(),
        }];
        let messages = condense_messages(&history, "and its side effects?");
        assert_eq!(messages.len(), 2);
        assert!(messages[1].content.contains("User: What is ibuprofen?"));
        assert!(
            messages[1]
                .content
                .ends_with("User (last question): and its side effects?")
        );
    }
}
