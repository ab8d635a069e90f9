//! The attribute macros of `wharf-sdk`; use them through `wharf_sdk::{tools, tool}`.
//!
//! `#[tools]` on an `impl` block turns every method marked `#[tool(...)]` into a tool and
//! adds `fn tool_set() -> wharf_sdk::Tools<Self>` to the block: the method's parameters
//! (besides `self` and an optional `&mut Call`) become the tool's arguments and JSON
//! Schema, its doc comment the description, and the attribute's arguments its session
//! need and annotations.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, FnArg, ImplItem, ImplItemFn, ItemImpl, Lit, LitStr, Meta, Pat, Type,
    parse_macro_input,
};

/// Collects the `#[tool]` methods of an `impl` block into `fn tool_set() -> Tools<Self>`.
///
/// ```ignore
/// #[wharf_sdk::tools]
/// impl Tracker {
///     /// Open an issue in this session.
///     #[tool(session = "required")]
///     fn open(&mut self, call: &mut Call, title: String) -> Result<Issue, ToolError> { … }
/// }
/// ```
#[proc_macro_attribute]
pub fn tools(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(
            Span::call_site(),
            "`#[tools]` takes no arguments; put them on each `#[tool(...)]`",
        )
        .to_compile_error()
        .into();
    }
    let block = parse_macro_input!(item as ItemImpl);
    match expand(block) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// Marks a method of a `#[tools]` impl block as a tool. Arguments: `name = "…"` (default:
/// the method's name), `session = "none" | "required" | "optional"`, and the flags
/// `read_only`, `destructive`, `idempotent`, `open_world`.
#[proc_macro_attribute]
pub fn tool(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = Tokens::from(item);
    let err = syn::Error::new(
        item.span(),
        "`#[tool]` marks a method of an impl block that carries `#[wharf_sdk::tools]`",
    )
    .to_compile_error();
    quote!(#err #item).into()
}

/// What `#[tool(...)]` said about one method.
#[derive(Default)]
struct ToolAttr {
    name: Option<LitStr>,
    session: Option<Tokens>,
    flags: Vec<syn::Ident>,
}

fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path().is_ident("tool")
}

fn parse_tool_attr(attr: &Attribute) -> syn::Result<ToolAttr> {
    let mut out = ToolAttr::default();
    if matches!(attr.meta, Meta::Path(_)) {
        return Ok(out);
    }
    attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("name") {
            out.name = Some(meta.value()?.parse()?);
            return Ok(());
        }
        if meta.path.is_ident("session") {
            let need: LitStr = meta.value()?.parse()?;
            let variant = match need.value().as_str() {
                "none" => quote!(None),
                "required" => quote!(Required),
                "optional" => quote!(Optional),
                other => {
                    return Err(syn::Error::new(
                        need.span(),
                        format!(
                            "unknown session need `{other}`: use \"none\", \"required\" or \"optional\""
                        ),
                    ));
                }
            };
            out.session = Some(quote!(::wharf_sdk::SessionNeed::#variant));
            return Ok(());
        }
        for flag in ["read_only", "destructive", "idempotent", "open_world"] {
            if meta.path.is_ident(flag) {
                out.flags.push(format_ident!("{flag}"));
                return Ok(());
            }
        }
        Err(meta.error(
            "unknown `#[tool]` argument: use name, session, read_only, destructive, idempotent or open_world",
        ))
    })?;
    Ok(out)
}

/// The doc comment of a method, lines joined with spaces, as the tool's description.
fn description(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(lit) => match &lit.lit {
                    Lit::Str(s) => Some(s.value().trim().to_string()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .collect();
    lines
        .split(|l| l.is_empty())
        .map(|para| para.join(" "))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Whether `ty` is `&mut Call` (the call context, not an argument).
fn is_call_context(ty: &Type) -> bool {
    let Type::Reference(reference) = ty else {
        return false;
    };
    if reference.mutability.is_none() {
        return false;
    }
    match reference.elem.as_ref() {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Call" && s.arguments.is_empty()),
        _ => false,
    }
}

/// One registered tool: the code that builds its argument struct and its `.tool(...)` call.
fn tool_of(method: &ImplItemFn, attr: ToolAttr) -> syn::Result<(Tokens, Tokens)> {
    let ident = &method.sig.ident;
    if method.sig.asyncness.is_some() || !method.sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            method.sig.span(),
            "a tool method is neither async nor generic",
        ));
    }
    let name = attr
        .name
        .map(|n| n.value())
        .unwrap_or_else(|| ident.to_string());
    let description = description(&method.attrs);
    let args_ty = format_ident!("__WharfArgs_{}", ident);
    let mut fields = Vec::new();
    let mut call_args = Vec::new();
    let mut receiver = None;
    for input in &method.sig.inputs {
        match input {
            FnArg::Receiver(r) => {
                if r.reference.is_none() {
                    return Err(syn::Error::new(
                        r.span(),
                        "a tool takes `&self` or `&mut self`, not `self`",
                    ));
                }
                receiver = Some(r.mutability.is_some());
            }
            FnArg::Typed(pat_ty) => {
                if is_call_context(&pat_ty.ty) {
                    call_args.push(quote!(__wharf_call));
                    continue;
                }
                let Pat::Ident(pat) = pat_ty.pat.as_ref() else {
                    return Err(syn::Error::new(
                        pat_ty.pat.span(),
                        "a tool parameter is a plain name (it becomes the argument's name)",
                    ));
                };
                let field = &pat.ident;
                let ty = &pat_ty.ty;
                let docs: Vec<&Attribute> = pat_ty
                    .attrs
                    .iter()
                    .filter(|a| a.path().is_ident("doc"))
                    .collect();
                fields.push(quote!(#(#docs)* #field: #ty));
                call_args.push(quote!(__wharf_args.#field));
            }
        }
    }
    let target = match receiver {
        Some(_) => quote!(__wharf_self.#ident(#(#call_args),*)),
        None => quote!(Self::#ident(#(#call_args),*)),
    };
    let session = attr
        .session
        .map(|need| quote!(.session(#need)))
        .unwrap_or_default();
    let flags = attr.flags.iter().map(|f| quote!(.#f()));
    let title = format!("{name} arguments");
    let def = quote! {
        #[derive(::wharf_sdk::Deserialize, ::wharf_sdk::JsonSchema)]
        #[serde(crate = "::wharf_sdk::serde", deny_unknown_fields)]
        #[schemars(crate = "::wharf_sdk::schemars", title = #title)]
        #[allow(non_camel_case_types)]
        struct #args_ty { #(#fields),* }
    };
    let register = quote! {
        .tool(
            #name,
            #description,
            |__wharf_self: &mut Self, __wharf_args: #args_ty, __wharf_call: &mut ::wharf_sdk::Call| {
                let _ = &__wharf_call;
                let _ = &__wharf_self;
                #target
            },
        )
        #session
        #(#flags)*
    };
    Ok((def, register))
}

/// Doc comments on parameters are not Rust; they are moved onto the argument fields.
fn strip_param_docs(method: &mut ImplItemFn) {
    for input in &mut method.sig.inputs {
        if let FnArg::Typed(pat_ty) = input {
            pat_ty.attrs.retain(|a| !a.path().is_ident("doc"));
        }
    }
}

fn expand(mut block: ItemImpl) -> syn::Result<Tokens> {
    if block.trait_.is_some() {
        return Err(syn::Error::new(
            block.span(),
            "`#[tools]` goes on an inherent impl block (`impl MyBackend { … }`), not a trait impl",
        ));
    }
    let mut defs = Vec::new();
    let mut registers = Vec::new();
    let mut names = Vec::new();
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else {
            continue;
        };
        let Some(index) = method.attrs.iter().position(is_tool_attr) else {
            continue;
        };
        let attr = method.attrs.remove(index);
        let parsed = parse_tool_attr(&attr)?;
        let name = parsed
            .name
            .as_ref()
            .map(LitStr::value)
            .unwrap_or_else(|| method.sig.ident.to_string());
        if names.contains(&name) {
            return Err(syn::Error::new(
                method.sig.ident.span(),
                format!("two tools are named `{name}`"),
            ));
        }
        names.push(name);
        let (def, register) = tool_of(method, parsed)?;
        strip_param_docs(method);
        defs.push(def);
        registers.push(register);
    }
    let (impl_generics, _, where_clause) = block.generics.split_for_impl();
    let self_ty = &block.self_ty;
    Ok(quote! {
        #block

        impl #impl_generics #self_ty #where_clause {
            /// The tools declared with `#[tool]` in this impl block.
            pub fn tool_set() -> ::wharf_sdk::Tools<Self> {
                #(#defs)*
                ::wharf_sdk::Tools::new()
                #(#registers)*
            }
        }
    })
}
