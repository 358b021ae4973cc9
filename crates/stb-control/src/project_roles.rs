//! Project-role assignments: a user holds a role of a project's `access.yml` for every
//! target of the project or for one. One active assignment per (user, project, role,
//! scope); revoked ones stay as history (`active_key` is `active` while it is, then the
//! row's own id, so the unique key lets a new active one in).

use serde::Serialize;
use sqlx::Row;

use crate::accounts::audit;
use crate::{ControlStore, ErrorKind, StoreError, now_ms};

/// An active assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assignment {
    pub id: String,
    pub user_id: String,
    pub project_name: String,
    pub role_name: String,
    /// `None`: every target of the project.
    pub target_name: Option<String>,
    pub assigned_by: Option<String>,
    pub assigned_at_ms: i64,
    pub revoked_by: Option<String>,
    pub revoked_at_ms: Option<i64>,
}

const COLUMNS: &str = "id, user_id, project_name, role_name, target_name, assigned_by, assigned_at, revoked_by, revoked_at";

fn assignment_of(row: &sqlx::any::AnyRow) -> Result<Assignment, sqlx::Error> {
    Ok(Assignment {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        project_name: row.try_get("project_name")?,
        role_name: row.try_get("role_name")?,
        target_name: row.try_get("target_name")?,
        assigned_by: row.try_get("assigned_by")?,
        assigned_at_ms: row.try_get("assigned_at")?,
        revoked_by: row.try_get("revoked_by")?,
        revoked_at_ms: row.try_get("revoked_at")?,
    })
}

const ACTIVE: &str = "active";

impl ControlStore {
    /// Assigns `role` of `project` to `user_id`, for `target` or every target (audited).
    ///
    /// # Errors
    /// The user holds that assignment already; `admin`/`viewer` are system roles.
    pub async fn grant_project_role(
        &self,
        user_id: &str,
        project: &str,
        role: &str,
        target: Option<&str>,
        actor: Option<&str>,
    ) -> Result<Assignment, StoreError> {
        if matches!(role, crate::ADMIN | crate::VIEWER) || role.trim() != role || role.is_empty() {
            return Err(StoreError::new(
                ErrorKind::Validation,
                format!("'{role}' cannot be a project role"),
            ));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO streambuild_project_role_assignments \
             (id, user_id, project_name, role_name, target_name, assignment_scope, assigned_by, assigned_at, active_key) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(id.as_str())
        .bind(user_id)
        .bind(project)
        .bind(role)
        .bind(target)
        .bind(target.unwrap_or_default())
        .bind(actor)
        .bind(now)
        .bind(ACTIVE)
        .execute(&mut *tx)
        .await?;
        audit(
            &mut tx,
            "project_role.granted",
            actor,
            Some(user_id),
            &serde_json::json!({"project": project, "role": role, "target": target}),
        )
        .await?;
        tx.commit().await?;
        Ok(Assignment {
            id,
            user_id: user_id.to_owned(),
            project_name: project.to_owned(),
            role_name: role.to_owned(),
            target_name: target.map(str::to_owned),
            assigned_by: actor.map(str::to_owned),
            assigned_at_ms: now,
            revoked_by: None,
            revoked_at_ms: None,
        })
    }

    /// Revokes assignment `id` (kept as history; audited).
    ///
    /// # Errors
    /// No such active assignment.
    pub async fn revoke_project_role(
        &self,
        id: &str,
        actor: Option<&str>,
    ) -> Result<Assignment, StoreError> {
        let mut tx = self.write().await?;
        let row = sqlx::query(
            "SELECT user_id, project_name, role_name, target_name FROM streambuild_project_role_assignments WHERE id = $1 AND active_key = $2",
        )
        .bind(id)
        .bind(ACTIVE)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| {
            StoreError::new(ErrorKind::NotFound, format!("no active assignment '{id}'"))
        })?;
        let user: String = row.try_get("user_id")?;
        sqlx::query(
            "UPDATE streambuild_project_role_assignments SET revoked_by = $1, revoked_at = $2, active_key = $3 WHERE id = $3",
        )
        .bind(actor)
        .bind(now_ms())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        audit(
            &mut tx,
            "project_role.revoked",
            actor,
            Some(&user),
            &serde_json::json!({
                "project": row.try_get::<String, _>("project_name")?,
                "role": row.try_get::<String, _>("role_name")?,
                "target": row.try_get::<Option<String>, _>("target_name")?,
            }),
        )
        .await?;
        let revoked = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM streambuild_project_role_assignments WHERE id = $1"
        ))
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        let revoked = assignment_of(&revoked)?;
        tx.commit().await?;
        Ok(revoked)
    }

    /// `user_id`'s active assignments in `project` that apply to `target` (pinned to it,
    /// or to every target), read fresh for each decision.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn project_roles(
        &self,
        user_id: &str,
        project: &str,
        target: &str,
    ) -> Result<Vec<Assignment>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM streambuild_project_role_assignments \
             WHERE user_id = $1 AND project_name = $2 AND active_key = $3 \
             AND (target_name IS NULL OR target_name = $4) ORDER BY role_name, assigned_at"
        ))
        .bind(user_id)
        .bind(project)
        .bind(ACTIVE)
        .bind(target)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(assignment_of).collect::<Result<_, _>>()?)
    }

    /// `user_id`'s assignments, in `project` or every project, revoked ones too when
    /// `include_revoked`; newest first.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn assignments_of(
        &self,
        user_id: &str,
        project: Option<&str>,
        include_revoked: bool,
    ) -> Result<Vec<Assignment>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM streambuild_project_role_assignments \
             WHERE user_id = $1 AND ($2 = '' OR project_name = $2) AND ($3 = 1 OR active_key = 'active') \
             ORDER BY assigned_at DESC"
        ))
        .bind(user_id)
        .bind(project.unwrap_or_default())
        .bind(i32::from(include_revoked))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(assignment_of).collect::<Result<_, _>>()?)
    }
}
