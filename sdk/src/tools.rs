//! Tool registration: a name, a description, a typed handler, and the JSON Schema of its
//! arguments generated from the argument type.

use crate::{Session, ToolError, bindings::wit_types};
use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// Whether a tool runs inside a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionNeed {
    /// Stateless.
    #[default]
    None,
    /// Needs a session created by `initialize`; the host refuses calls without one.
    Required,
    /// Uses a session when the caller has one.
    Optional,
}

/// Hints for agents, mirrored into MCP tool annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Annotations {
    /// The tool changes nothing.
    pub read_only: bool,
    /// The tool may destroy or overwrite data.
    pub destructive: bool,
    /// Calling it twice with the same arguments has the effect of calling it once.
    pub idempotent: bool,
    /// The tool reaches beyond the backend (the network, other systems).
    pub open_world: bool,
}

/// One tool as a backend lists it at run time ([`crate::Backend::list_tools`]): the
/// description a typed [`Tools`] entry derives from its types, written out.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The action part; the host prefixes the backend's name.
    pub name: String,
    /// What the tool does, written for agents.
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// JSON Schema of the result, when one is promised.
    pub output_schema: Option<Value>,
    /// Whether the tool needs a session.
    pub session: SessionNeed,
    /// Hints for agents.
    pub annotations: Annotations,
}

impl From<ToolSpec> for wit_types::ToolSpec {
    fn from(t: ToolSpec) -> Self {
        Self {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema.to_string(),
            output_schema: t.output_schema.as_ref().map(Value::to_string),
            session: t.session.into(),
            annotations: t.annotations.into(),
        }
    }
}

impl From<SessionNeed> for wit_types::SessionNeed {
    fn from(need: SessionNeed) -> Self {
        match need {
            SessionNeed::None => Self::None,
            SessionNeed::Required => Self::Required,
            SessionNeed::Optional => Self::Optional,
        }
    }
}

impl From<Annotations> for wit_types::ToolAnnotations {
    fn from(a: Annotations) -> Self {
        Self {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        }
    }
}

/// Arguments of a tool that takes none.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// Binary output of a tool (a screenshot, a file).
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// File name shown to the agent.
    pub name: String,
    /// MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// The bytes.
    pub data: Vec<u8>,
}

/// What a tool handler can see and add besides its arguments: the session, attachments and
/// new session data.
#[derive(Debug, Default)]
pub struct Call {
    session: Option<Session>,
    attachments: Vec<Attachment>,
    session_data: Option<Value>,
}

impl Call {
    /// A call context, as the export glue builds it (also handy in unit tests).
    pub fn new(session: Option<Session>) -> Self {
        Self {
            session,
            ..Self::default()
        }
    }
    /// The session this call runs in, if any.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }
    /// The session, or a 4007 error when the call has none.
    pub fn require_session(&self) -> Result<&Session, ToolError> {
        self.session.as_ref().ok_or_else(|| {
            ToolError::session_not_found(
                "this tool needs a session and the call has none (a tool the backend declares \
                     without `.session(SessionNeed::Required)` / `#[tool(session = \"required\")]` \
                     never receives one)",
            )
        })
    }
    /// Adds binary output (a PNG, a file) to the result.
    pub fn attach(&mut self, name: impl Into<String>, mime_type: impl Into<String>, data: Vec<u8>) {
        self.attachments.push(Attachment {
            name: name.into(),
            mime_type: mime_type.into(),
            data,
        });
    }
    /// Replaces the session data the host stores; later calls see it.
    pub fn set_session_data(&mut self, data: Value) {
        self.session_data = Some(data);
    }
    /// The attachments added so far.
    pub fn attachments(&self) -> &[Attachment] {
        &self.attachments
    }
    /// The session data set by this call, if any.
    pub fn new_session_data(&self) -> Option<&Value> {
        self.session_data.as_ref()
    }
    pub(crate) fn into_outputs(self) -> (Vec<Attachment>, Option<Value>) {
        (self.attachments, self.session_data)
    }
}

type Handler<B> = Box<dyn Fn(&mut B, Value, &mut Call) -> Result<Value, ToolError>>;

struct Tool<B> {
    name: String,
    description: String,
    input_schema: Value,
    output_schema: Option<Value>,
    session: SessionNeed,
    annotations: Annotations,
    handler: Handler<B>,
}

/// The tools of a backend of type `B`. Each `tool` call registers one; the modifiers that
/// follow (`session`, `read_only`, …) apply to the tool registered last.
pub struct Tools<B> {
    tools: Vec<Tool<B>>,
}

impl<B> Default for Tools<B> {
    fn default() -> Self {
        Self { tools: Vec::new() }
    }
}

fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Bool(true))
}

impl<B: 'static> Tools<B> {
    /// No tools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool. `name` is the action part (`search`); the host prefixes the
    /// backend's name. The argument type gives the input schema, the result type the
    /// output schema.
    pub fn tool<A, R, F>(mut self, name: &str, description: &str, handler: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + 'static,
        R: Serialize + JsonSchema + 'static,
        F: Fn(&mut B, A, &mut Call) -> Result<R, ToolError> + 'static,
    {
        let handler: Handler<B> = Box::new(move |backend, args, call| {
            let args: A = serde_json::from_value(args).map_err(|e| {
                ToolError::new(
                    crate::codes::INVALID_TYPE,
                    format!("invalid arguments: {e}"),
                )
            })?;
            let result = handler(backend, args, call)?;
            serde_json::to_value(result)
                .map_err(|e| ToolError::execution(format!("result is not JSON: {e}")))
        });
        self.tools.push(Tool {
            name: name.to_string(),
            description: description.to_string(),
            input_schema: schema_of::<A>(),
            output_schema: Some(schema_of::<R>()),
            session: SessionNeed::None,
            annotations: Annotations::default(),
            handler,
        });
        self
    }

    fn last(&mut self) -> Option<&mut Tool<B>> {
        self.tools.last_mut()
    }

    /// The last tool's session need.
    pub fn session(mut self, need: SessionNeed) -> Self {
        if let Some(t) = self.last() {
            t.session = need;
        }
        self
    }
    /// Marks the last tool read-only (and idempotent).
    pub fn read_only(mut self) -> Self {
        if let Some(t) = self.last() {
            t.annotations.read_only = true;
            t.annotations.idempotent = true;
        }
        self
    }
    /// Marks the last tool destructive.
    pub fn destructive(mut self) -> Self {
        if let Some(t) = self.last() {
            t.annotations.destructive = true;
        }
        self
    }
    /// Marks the last tool idempotent.
    pub fn idempotent(mut self) -> Self {
        if let Some(t) = self.last() {
            t.annotations.idempotent = true;
        }
        self
    }
    /// Marks the last tool as reaching the outside world.
    pub fn open_world(mut self) -> Self {
        if let Some(t) = self.last() {
            t.annotations.open_world = true;
        }
        self
    }

    /// Runs the tool named `name`.
    pub fn call(
        &self,
        backend: &mut B,
        name: &str,
        args: Value,
        call: &mut Call,
    ) -> Result<Value, ToolError> {
        let tool = self.tools.iter().find(|t| t.name == name).ok_or_else(|| {
            ToolError::new(
                crate::codes::INVALID_REQUEST,
                format!("unknown tool `{name}`"),
            )
        })?;
        (tool.handler)(backend, args, call)
    }

    /// The names of the registered tools.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_str())
    }

    /// Whether a tool named `name` is registered.
    pub fn has(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name)
    }

    pub(crate) fn specs(&self) -> Vec<wit_types::ToolSpec> {
        self.tools
            .iter()
            .map(|t| wit_types::ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.to_string(),
                output_schema: t.output_schema.as_ref().map(Value::to_string),
                session: t.session.into(),
                annotations: t.annotations.into(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    struct AddArgs {
        a: i64,
        b: i64,
    }

    struct Calc {
        calls: u32,
    }

    fn tools() -> Tools<Calc> {
        Tools::new()
            .tool(
                "add",
                "Adds two numbers",
                |c: &mut Calc, args: AddArgs, _call: &mut Call| {
                    c.calls += 1;
                    Ok(args.a + args.b)
                },
            )
            .read_only()
    }

    #[test]
    fn schema_is_generated_from_the_argument_type() {
        let specs = tools().specs();
        assert_eq!(specs.len(), 1);
        let schema: Value = serde_json::from_str(&specs[0].input_schema).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["a"]["type"], "integer");
        assert!(specs[0].annotations.read_only);
    }

    #[test]
    fn call_dispatches_and_maps_bad_args_to_4004() {
        let tools = tools();
        let mut calc = Calc { calls: 0 };
        let mut call = Call::new(None);
        let sum = tools
            .call(
                &mut calc,
                "add",
                serde_json::json!({"a": 2, "b": 3}),
                &mut call,
            )
            .unwrap();
        assert_eq!(sum, serde_json::json!(5));
        assert_eq!(calc.calls, 1);
        let err = tools
            .call(&mut calc, "add", serde_json::json!({"a": "x"}), &mut call)
            .unwrap_err();
        assert_eq!(err.code, 4004);
        let err = tools
            .call(&mut calc, "nope", serde_json::json!({}), &mut call)
            .unwrap_err();
        assert_eq!(err.code, 4002);
    }
}
